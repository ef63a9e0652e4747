"""Where training metrics go: loggers, the experiment trackers that plugins register.

A logger is a class that a plugin registers with the ``rlx_register_loggers`` hook (a
:class:`~rlx.spec.LoggerSpec` naming it as ``"module:Class"``); ``rlx run --logger NAME``
or the trainer setting ``loggers`` uses it. rlx-core registers four: ``csv`` (always on:
``metrics.csv`` is the run's own record), ``tensorboard`` (on when the ``tensorboard``
setting is, and the package installed), ``mlflow`` and ``wandb`` (optional extras).

Writing one takes three methods (:class:`Logger`); the keyword arguments of its constructor
are its options (``--logger 'name,key=value,...'``)::

    class PrintLogger:
        def __init__(self, every: int = 1) -> None:   # options; no files, no network yet
            self.every = every

        def start(self, run: RunInfo) -> None:        # the run directory exists now
            print("training", run.identity.agent, "on", run.identity.env)

        def log(self, step: int, row: Mapping[str, Any]) -> None:
            print(step, row.get("eval/return_mean"))

        def finish(self, result: Any) -> None:        # TrainResult, or None after an error
            print("done")

A loop of your own logs through the same loggers with :class:`MetricsLogger`
(``write(metrics, step)``, ``close()``); :class:`TableLogger` prints every metric as a table.

The constructor must be cheap and write nothing: the trainer builds every logger before
it writes the run directory, so that a missing library or a bad option stops the run
with nothing written. A library the class needs is imported in the constructor; when it
is missing, the error names the install command of the spec's ``extra``.
"""

from __future__ import annotations

import csv
import inspect
import io
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from rlx.errors import ConfigError, RlxError, did_you_mean
from rlx.protocols import RunIdentity

#: Loggers the trainer adds by itself (``csv`` for every recorded run; ``tensorboard`` when
#: the setting is on and the package installed); naming them in ``loggers`` is allowed.
BUILTIN = ("csv", "tensorboard")


@dataclass(frozen=True)
class RunInfo:
    """What a logger learns when the run starts.

    ``run_dir`` is the run directory (``None`` for a run that records nothing);
    ``identity`` the agent, environment, seed and hyperparameters; ``config`` what
    ``config.json`` holds (identity, ``trainer`` settings, package versions); ``resumed``
    the trainer state of the checkpoint a resumed run continues from (``None`` for a new
    run), whose ``env_steps`` is where logging picks up again.
    """

    run_dir: Path | None
    identity: RunIdentity
    config: Mapping[str, Any]
    resumed: Mapping[str, Any] | None = None

    @property
    def name(self) -> str:
        """A short name of the run: its directory's name, or agent-env-seed."""
        if self.run_dir is not None:
            return self.run_dir.name
        return f"{self.identity.agent}-{self.identity.env}-s{self.identity.seed}"


@runtime_checkable
class Logger(Protocol):
    """An experiment tracker: told when the run starts, given every metrics row, told the end.

    ``log`` gets the environment steps and the row the trainer writes to metrics.csv
    (counters such as ``env_steps`` and ``iterations``, ``train/...``, ``eval/...`` and
    ``agent/...`` metrics; numbers, sometimes with other keys missing). ``finish`` is called
    exactly once for a started logger, however the run ends: with the
    :class:`~rlx.evaluation.TrainResult` (``stop_reason`` says why it stopped; ``"interrupted"``
    for Ctrl-C) or with ``None`` when training failed with an error. A logger whose ``start``
    raised is not finished. Errors of a logger other than csv during ``log`` and ``finish``
    are reported as warnings and never stop the run.
    """

    def start(self, run: RunInfo) -> None:
        """The run starts, or resumes (``run.resumed``); an error raised here stops the run before
        it trains."""
        ...

    def log(self, step: int, row: Mapping[str, Any]) -> None:
        """One metrics row, at ``step`` environment steps."""
        ...

    def finish(self, result: Any) -> None:
        """The run ended: ``result`` is its :class:`~rlx.evaluation.TrainResult`, or None when
        training failed."""
        ...


# -- choosing loggers -----------------------------------------------------------------------


def normalize(entries: Any) -> tuple[dict[str, Any], ...]:
    """Logger entries as ``{"name", "kwargs"}`` dicts; a string is ``"name,key=value,..."``.

    ``entries`` is one entry or a list of them, as the command line, a TOML config (a list
    of strings or of tables with ``name`` and ``kwargs``) or a saved config.json gives them.
    """
    from rlx.wrappers import parse

    if isinstance(entries, (str, Mapping)):
        entries = [entries]
    if not isinstance(entries, Iterable):
        raise ConfigError(f"loggers must be a list of names or tables, got {entries!r}")
    result = []
    for entry in entries:
        if isinstance(entry, str):
            parsed = parse(entry, option="--logger")
            entry = {"name": parsed["name"], "kwargs": parsed["kwargs"]}
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise ConfigError(
                f"a logger is 'name,key=value,...' or a table with name and kwargs; got {entry!r}"
            )
        if "=" in entry["name"]:
            raise ConfigError(
                f"{entry['name']!r} is not a logger name; give loggers as a list, one string "
                'per logger: loggers = ["mlflow,experiment=x"]'
            )
        unknown = sorted(set(entry) - {"name", "kwargs"})
        if unknown:
            raise ConfigError(
                f"logger {entry['name']!r}: unknown key {unknown[0]!r} (a logger has name, kwargs)"
            )
        kwargs = entry.get("kwargs") or {}
        if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
            raise ConfigError(f"logger {entry['name']!r}: kwargs must be a table, got {kwargs!r}")
        result.append({"name": entry["name"].strip(), "kwargs": dict(kwargs)})
    return tuple(result)


def check_loggers(entries: Any) -> tuple[dict[str, Any], ...]:
    """The entries normalised (:func:`normalize`); refuses, before anything is written, an
    unknown logger name (with a did-you-mean) or an option its class does not take. Imports
    each logger's class, never the library it needs."""
    entries = normalize(entries)
    for entry in entries:
        _checked_class(entry)
    return entries


def _checked_class(entry: Mapping[str, Any]) -> Any:
    from rlx.discovery import get_registry

    name, kwargs = entry["name"], entry["kwargs"]
    spec = get_registry().logger(name)
    cls = spec.load()
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):  # a class without a readable signature: nothing to check
        return spec, cls
    parameters = signature.parameters
    takes_any = any(p.kind is p.VAR_KEYWORD for p in parameters.values())
    options = [
        p.name for p in parameters.values() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    for key in kwargs:
        if key not in options and not takes_any:
            listing = f" Options: {', '.join(options)}." if options else " It takes no options."
            raise ConfigError(
                f"logger {name!r} has no option {key!r}.{did_you_mean(key, options)}{listing}"
            )
    try:
        signature.bind(**kwargs)
    except TypeError as exc:
        raise ConfigError(f"logger {name!r}: {exc}") from None
    return spec, cls


def build_loggers(entries: Iterable[Mapping[str, Any]]) -> list[Any]:
    """One logger object per entry; a missing library names the install command."""
    loggers = []
    for entry in entries:
        spec, cls = _checked_class(entry)
        try:
            logger = cls(**entry["kwargs"])
        except ImportError as exc:
            missing = exc.name or str(exc)
            install = f"pip install '{spec.extra}'" if spec.extra else f"install {missing}"
            raise ConfigError(
                f"logger {spec.name!r} needs {missing}, which is not installed: {install}"
            ) from None
        except RlxError:
            raise
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"logger {spec.name!r}: {exc}") from exc
        loggers.append(logger)
    return loggers


def numbers(row: Mapping[str, Any]) -> dict[str, float]:
    """The finite numeric values of a metrics row (what a tracker can plot)."""
    return {
        key: float(value)
        for key, value in row.items()
        if isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    }


def _artifacts(run: RunInfo | None) -> tuple[Path | None, Path | None]:
    """The learning curve PNG and the final checkpoint directory of a run, where they exist."""
    if run is None or run.run_dir is None:
        return None, None
    curve, final = run.run_dir / "learning_curve.png", run.run_dir / "final"
    return (curve if curve.is_file() else None), (final if final.is_dir() else None)


def _stop_status(result: Any) -> str:
    """``finished``, ``interrupted`` or ``failed``: how a run ended, for a tracker's status."""
    if result is None:
        return "failed"
    return "interrupted" if getattr(result, "stop_reason", "") == "interrupted" else "finished"


def standard_loggers(
    configured: Iterable[Any], named: Iterable[str], recorded: bool, tensorboard: bool
) -> list[Any]:
    """The loggers of a run: the ``configured`` ones (built from entries whose names are
    ``named``), then, for a ``recorded`` run (one with a directory), csv and, where the
    ``tensorboard`` switch is on and the package installed, TensorBoard, unless named already."""
    named = set(named)
    loggers = list(configured)
    if recorded and "csv" not in named:
        loggers.append(CsvLogger())
    if recorded and tensorboard and "tensorboard" not in named and TensorBoardLogger.available():
        loggers.append(TensorBoardLogger())
    return loggers


def log_row(
    loggers: list[Any], step: int, row: Mapping[str, Any], warn: Callable[[str], None]
) -> None:
    """Give ``row`` at ``step`` to every logger; a tracker that fails is removed from
    ``loggers`` with a warning (training goes on), while a failure of the csv logger, the
    run's own record, is raised."""
    for logger in list(loggers):
        try:
            logger.log(step, row)
        except Exception as exc:
            if isinstance(logger, CsvLogger):
                raise
            loggers.remove(logger)
            warn(f"logger {type(logger).__name__} failed and is left out: {exc}")


def finish_loggers(loggers: list[Any], result: Any, warn: Callable[[str], None]) -> None:
    """Finish (and remove) every logger of ``loggers`` once; one that fails to finish is
    reported and the others are still finished (the csv logger's failure is raised unless
    ``result`` is None: the run failed anyway)."""
    while loggers:
        logger = loggers.pop(0)
        try:
            logger.finish(result)
        except Exception as exc:
            if isinstance(logger, CsvLogger) and result is not None:
                raise
            warn(f"logger {type(logger).__name__} failed to finish: {exc}")


# -- csv and TensorBoard -------------------------------------------------------------------------


class CsvLogger:
    """Appends one row per log event to ``RUN_DIR/metrics.csv``; a new metric name widens the
    header.

    On resume the file is cut back to the rows that existed when the checkpoint was taken
    (the checkpoint's ``csv_rows``), so a resumed run's file equals an uninterrupted run's.
    """

    #: The arguments that send data outside the run (:mod:`rlx.trust`).
    trust_arguments: ClassVar[dict[str, str]] = {}

    def __init__(self) -> None:
        self.path: Path | None = None
        self.rows: list[dict[str, Any]] = []
        self.columns: list[str] = []

    def start(self, run: RunInfo) -> None:
        """Write to ``RUN_DIR/metrics.csv``; on resume, cut it back to the checkpoint's ``csv_rows``
        rows. A run without a directory is a :class:`~rlx.errors.ConfigError`."""
        if run.run_dir is None:
            raise ConfigError("the csv logger writes metrics.csv into the run directory: give one")
        from rlx.runs import METRICS_FILE, read_metrics

        self.path = run.run_dir / METRICS_FILE
        if run.resumed is not None and self.path.exists():
            self.columns, rows = read_metrics(self.path)
            self.rows = rows[: int(run.resumed.get("csv_rows", 0))]
            self._check_read()
            self._rewrite()

    def _check_read(self) -> None:
        """Refuse a metrics.csv read on resume whose header cannot be the one rlx wrote (an
        empty or repeated name) or whose kept rows hold another number of values than it
        names: which metric a value is can no longer be told, so the file is not repaired."""
        from rlx.errors import CheckpointError

        problem = ""
        repeated = [name for i, name in enumerate(self.columns) if name in self.columns[:i]]
        if not all(self.columns):
            problem = "its header has an empty column name"
        elif repeated:
            problem = f"its header names the column {repeated[0]!r} twice"
        for line, row in enumerate(self.rows, start=2):
            if problem:
                break
            # csv.DictReader keeps values beyond the header under None, and fills the
            # columns of a short row with None
            width = sum(value is not None for key, value in row.items() if key is not None)
            width += len(row.get(None) or ())  # type: ignore[call-overload]
            if width != len(self.columns):
                problem = (
                    f"line {line} holds {width} values, its header names {len(self.columns)} "
                    "columns"
                )
        if problem:
            raise CheckpointError(
                f"{self.path} is cut or edited: {problem}, so which metric each value is "
                "cannot be told; put back the run's own metrics.csv, or move it aside to "
                "resume with a new one"
            )

    def log(self, step: int, row: Mapping[str, Any]) -> None:
        """Append the row (floats to 6 significant digits); a new metric name rewrites the file with
        the wider header."""
        assert self.path is not None, "start() first"
        row = {key: _format(value) for key, value in row.items()}
        self.rows.append(row)
        new = [key for key in row if key not in self.columns]
        if new or not self.path.exists():
            self.columns += new
            self._rewrite()
        else:  # never appended through a link planted in the run directory
            from rlx.files import open_to_append

            with open_to_append(self.path, newline="") as f:
                csv.DictWriter(f, self.columns).writerow(row)

    def finish(self, result: Any) -> None:
        """Nothing to close: every row is on disk as soon as it is logged."""

    def _rewrite(self) -> None:
        from rlx.files import write_bytes_atomic

        assert self.path is not None
        text = io.StringIO(newline="")
        writer = csv.DictWriter(text, self.columns)
        writer.writeheader()
        writer.writerows(self.rows)
        write_bytes_atomic(self.path, text.getvalue().encode())


def _format(value: Any) -> Any:
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:.6g}"
    return value


class TensorBoardLogger:
    """Writes the ``train/``, ``eval/``, ``agent/`` and ``time/`` metrics as TensorBoard events
    in ``RUN_DIR/tensorboard`` with the ``tensorboard`` package (no torch, no TensorFlow)."""

    #: The arguments that send data outside the run (:mod:`rlx.trust`).
    trust_arguments: ClassVar[dict[str, str]] = {}

    def __init__(self) -> None:
        import tensorboard  # noqa: F401  (a missing extra fails here, before the run starts)

        self._writer: Any = None
        #: Write every number of a row but this column (the step), not only names with a
        #: ``/``; :class:`MetricsLogger` sets it, whose rows are a user's own names.
        self.all_but: str | None = None

    @staticmethod
    def available() -> bool:
        """Whether the ``tensorboard`` package is installed (found without importing it)."""
        import importlib.util

        return importlib.util.find_spec("tensorboard") is not None

    def start(self, run: RunInfo) -> None:
        """Open an event file in ``RUN_DIR/tensorboard``; a run without a directory is a
        :class:`~rlx.errors.ConfigError`."""
        if run.run_dir is None:
            raise ConfigError("the tensorboard logger writes into the run directory: give one")
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self._writer = EventFileWriter(str(run.run_dir / "tensorboard"))

    def log(self, step: int, row: Mapping[str, Any]) -> None:
        """One event at ``step`` with every numeric value of the row whose name has a ``/``
        (``train/``, ``eval/``, ...), or every one but :attr:`all_but`, as a scalar."""
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary

        values = [
            Summary.Value(tag=tag, simple_value=float(value))
            for tag, value in row.items()
            if isinstance(value, (int, float))
            and (tag != self.all_but if self.all_but is not None else "/" in tag)
        ]
        self._writer.add_event(
            Event(wall_time=time.time(), step=step, summary=Summary(value=values))
        )

    def finish(self, result: Any) -> None:
        """Close the event file."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None


# -- MLflow ------------------------------------------------------------------------------------


class MlflowLogger:
    """Logs a run to MLflow: hyperparameters and trainer settings as params, every metric
    against environment steps, tags (agent, environment, seed, rlx run directory), and at
    the end the learning curve and the final checkpoint as artifacts.

    ``tracking_uri``: a server (``http://host:5000``), a database (``sqlite:///mlflow.db``)
    or a file store (``file:///path/mlruns``; MLflow 3 wants ``MLFLOW_ALLOW_FILE_STORE=true``
    for it); by default ``MLFLOW_TRACKING_URI``, else MLflow's own default.
    ``experiment`` defaults to ``rlx/<environment id>``; ``run_name`` to the run directory's
    name. A resumed rlx run continues the MLflow run that carries its run directory's tag.
    """

    #: The arguments that send data outside the run (:mod:`rlx.trust`).
    trust_arguments: ClassVar[dict[str, str]] = {"tracking_uri": "destination"}

    #: Seconds to wait for an MLflow server to answer before the run is refused.
    CONNECT_TIMEOUT = 5.0

    def __init__(
        self,
        tracking_uri: str | None = None,
        experiment: str | None = None,
        run_name: str | None = None,
    ) -> None:
        import mlflow  # noqa: F401  (a missing extra fails here, before the run starts)

        self.tracking_uri = str(tracking_uri) if tracking_uri is not None else None
        #: The store used: the option, else MLFLOW_TRACKING_URI, else MLflow's default (None).
        self.uri = self.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or None
        if self.uri is not None:
            _check_mlflow_uri(self.uri, self.CONNECT_TIMEOUT)
        self.experiment = str(experiment) if experiment is not None else None
        self.run_name = str(run_name) if run_name is not None else None
        self._client: Any = None
        self._run_id: str | None = None
        self._run: RunInfo | None = None

    def start(self, run: RunInfo) -> None:
        """Create the MLflow run, with its tags and params, in ``experiment`` (made if missing), or,
        when the rlx run resumes, reopen the MLflow run tagged with its run directory; an MLflow
        error is a :class:`~rlx.errors.ConfigError`."""
        from mlflow import MlflowClient
        from mlflow.exceptions import MlflowException

        uri = self.uri
        identity = run.identity
        experiment = self.experiment or f"rlx/{identity.env}"
        try:
            client = MlflowClient(tracking_uri=uri)
            found = client.get_experiment_by_name(experiment)
            experiment_id = (
                found.experiment_id if found is not None else client.create_experiment(experiment)
            )
            run_id = self._previous_run(client, experiment_id, run)
            if run_id is None:
                tags = {
                    "rlx.agent": identity.agent,
                    "rlx.env": identity.env,
                    "rlx.seed": str(identity.seed),
                    "rlx.family": identity.family,
                }
                if run.run_dir is not None:
                    tags["rlx.run_dir"] = str(run.run_dir.resolve())
                created = client.create_run(
                    experiment_id, run_name=self.run_name or run.name, tags=tags
                )
                run_id = created.info.run_id
                client.log_batch(run_id, params=_mlflow_params(run))
            else:
                client.update_run(run_id, status="RUNNING")
        except Exception as exc:  # MLflow's own errors, and those of its database libraries
            library = type(exc).__module__.split(".")[0]
            if not isinstance(exc, MlflowException) and library not in ("sqlalchemy", "alembic"):
                raise
            where = uri or "its default store"
            raise ConfigError(f"MLflow at {where}: {_mlflow_text(exc)}") from exc
        self._client, self._run_id, self._run = client, run_id, run

    @staticmethod
    def _previous_run(client: Any, experiment_id: str, run: RunInfo) -> str | None:
        """The MLflow run of the rlx run a resumed run continues, if there is one."""
        if run.resumed is None or run.run_dir is None:
            return None
        path = str(run.run_dir.resolve()).replace("'", "\\'")
        runs = client.search_runs(
            [experiment_id], filter_string=f"tags.`rlx.run_dir` = '{path}'", max_results=1
        )
        return runs[0].info.run_id if runs else None

    def log(self, step: int, row: Mapping[str, Any]) -> None:
        """Log the row's finite numbers as metrics at ``step`` (in batches of 1,000)."""
        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        metrics = [Metric(key, value, stamp, step) for key, value in numbers(row).items()]
        for chunk in range(0, len(metrics), 1000):
            self._client.log_batch(self._run_id, metrics=metrics[chunk : chunk + 1000])

    def finish(self, result: Any) -> None:
        """Upload the learning curve and the final checkpoint and tag the stop reason (unless the
        run failed), then mark the MLflow run finished, killed (interrupted) or failed."""
        if self._client is None:
            return
        status = {"finished": "FINISHED", "interrupted": "KILLED", "failed": "FAILED"}
        try:
            if result is not None:
                curve, final = _artifacts(self._run)
                if curve is not None:
                    self._client.log_artifact(self._run_id, str(curve))
                if final is not None:
                    self._client.log_artifacts(self._run_id, str(final), artifact_path="final")
                self._client.set_tag(self._run_id, "rlx.stop_reason", result.stop_reason)
        finally:
            self._client.set_terminated(self._run_id, status[_stop_status(result)])
            self._client = None


def _check_mlflow_uri(uri: str, timeout: float) -> None:
    """Refuse at once an MLflow server that does not answer (MLflow's own client retries for
    minutes), and explain MLflow 3's refusal of a file store."""
    import urllib.error
    import urllib.request

    if uri.startswith(("http://", "https://")):
        try:
            urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout).close()
        except urllib.error.HTTPError:
            pass  # the server answered (a proxy or an older server without /health)
        except (OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ConfigError(
                f"cannot reach the MLflow server at {uri} ({reason}); start it (mlflow server) "
                "or give another tracking_uri, e.g. --logger 'mlflow,tracking_uri=sqlite:///mlflow.db'"
            ) from None
    elif uri.startswith("sqlite"):
        database = _mlflow_sqlite_file(uri)
        if database is not None:
            reason = _mlflow_unwritable(database, is_file=True) or _not_sqlite(database)
            if reason is not None:
                raise ConfigError(f"MLflow database {uri}: {reason}")
    elif uri.startswith("file:") or "://" not in uri:
        if os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() not in ("1", "true"):
            raise ConfigError(
                f"MLflow 3 refuses its file store ({uri}) unless MLFLOW_ALLOW_FILE_STORE=true is "
                "set; set it, or use a database such as tracking_uri=sqlite:///mlflow.db"
            )
        from urllib.parse import unquote, urlparse

        store = Path(unquote(urlparse(uri).path)) if uri.startswith("file:") else Path(uri)
        reason = _mlflow_unwritable(store, is_file=False)
        if reason is not None:
            raise ConfigError(f"MLflow file store {uri}: {reason}")


def _mlflow_sqlite_file(uri: str) -> Path | None:
    """The database file of an SQLite tracking URI (``sqlite:///relative.db``,
    ``sqlite:////absolute.db``); None for an in-memory database or a URI SQLAlchemy cannot
    read (MLflow's own error then says why)."""
    try:
        from sqlalchemy.engine import make_url

        database = make_url(uri).database
    except Exception:
        return None
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database)


def _not_sqlite(path: Path) -> str | None:
    """Why the existing file ``path`` is not an SQLite database (its first 16 bytes are
    SQLite's header), or None; a missing or empty file becomes one."""
    try:
        with open(path, "rb") as file:
            head = file.read(16)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror or exc})"
    if head and head != b"SQLite format 3\x00":
        return f"{path} is not an SQLite database; give a new file or an MLflow database"
    return None


def _mlflow_unwritable(path: Path, is_file: bool) -> str | None:
    """Why MLflow could not write its store at ``path`` (a database file, or a file store's
    folder; missing folders above it are made), or None. Checked before MLflow is touched:
    its client retries an unwritable database for about two minutes before it gives up."""
    import tempfile

    if path.exists():
        if is_file and not path.is_file():
            return f"{path} is not a file"
        if not is_file and not path.is_dir():
            return f"{path} is not a directory"
        if not os.access(path, os.R_OK | os.W_OK):
            return f"{path} is not writable"
    folder = path.parent if is_file else path
    for existing in [folder, *folder.parents]:
        if existing.exists():
            break
    if not existing.is_dir():
        return f"{existing} is not a directory"
    try:  # an unnamed temporary file: os.access says yes to root even in /proc
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        return f"cannot write in {existing} ({exc.strerror or exc})"
    return None


def _mlflow_params(run: RunInfo) -> list[Any]:
    """The hyperparameters, seed and trainer settings as MLflow params (values cut to MLflow's
    6000-character limit)."""
    from mlflow.entities import Param

    values: dict[str, Any] = dict(run.identity.hyperparameters)
    values["seed"] = run.identity.seed
    for key, value in (run.config.get("trainer") or {}).items():
        if key != "loggers":
            values[f"trainer.{key}"] = value
    return [Param(key, str(value)[:6000]) for key, value in values.items()]


def _mlflow_text(exc: BaseException) -> str:
    lines = str(getattr(exc, "message", exc)).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


# -- Weights & Biases -----------------------------------------------------------------------------


class WandbLogger:
    """Logs a run to Weights & Biases: the run's config (agent, environment, seed,
    hyperparameters, trainer settings), every metric against environment steps, and at the
    end the learning curve as an image and the final checkpoint as a model artifact.

    ``mode`` is ``online``, ``offline`` (no network; ``wandb sync`` uploads later) or
    ``disabled``; by default ``WANDB_MODE``, else wandb's own default. ``dir`` is where wandb
    writes its files (default: the run directory). ``project`` defaults to ``rlx``.
    A resumed rlx run continues the wandb run it started (its id is kept in
    ``RUN_DIR/wandb/rlx-run-id``).
    """

    #: The arguments that send data outside the run (:mod:`rlx.trust`).
    trust_arguments: ClassVar[dict[str, str]] = {"entity": "destination", "dir": "destination"}

    ID_FILE = "rlx-run-id"

    def __init__(
        self,
        project: str = "rlx",
        entity: str | None = None,
        mode: str | None = None,
        dir: str | None = None,
        run_name: str | None = None,
        tags: list[str] | None = None,
    ) -> None:
        import wandb  # noqa: F401  (a missing extra fails here, before the run starts)

        modes = ("online", "offline", "disabled")
        if mode is not None and mode not in modes:
            raise ConfigError(
                f"logger 'wandb': mode must be one of {', '.join(modes)}, got {mode!r}."
                + did_you_mean(str(mode), modes)
            )
        self.project, self.entity, self.mode = str(project), entity, mode
        self.dir, self.run_name = dir, run_name
        self.tags = [str(tag) for tag in tags] if tags else []
        self._run: Any = None
        self._info: RunInfo | None = None

    def start(self, run: RunInfo) -> None:
        """Start the wandb run (its id kept in ``RUN_DIR/wandb/rlx-run-id``), or continue the run
        that file names when the rlx run resumes; a failure to start is a
        :class:`~rlx.errors.ConfigError` saying how to log in or go offline."""
        import wandb

        where = Path(self.dir) if self.dir is not None else run.run_dir
        run_id, resume = None, None
        id_file = run.run_dir / "wandb" / self.ID_FILE if run.run_dir is not None else None
        if run.resumed is not None and id_file is not None and id_file.is_file():
            run_id, resume = id_file.read_text().strip(), "allow"
        config = {key: value for key, value in run.config.items() if key != "versions"}
        try:
            if where is not None:
                where.mkdir(parents=True, exist_ok=True)
            self._run = wandb.init(
                project=self.project,
                entity=self.entity,
                mode=self.mode,  # type: ignore[arg-type]  # wandb checks the value
                dir=str(where) if where is not None else None,
                name=self.run_name or run.name,
                id=run_id,
                resume=resume,  # type: ignore[arg-type]
                config=config,
                tags=[run.identity.agent, run.identity.env, *self.tags],
                reinit="create_new",
                settings=wandb.Settings(console="off", silent=True, disable_git=True),
            )
        except (wandb.errors.Error, OSError) as exc:
            raise ConfigError(
                f"wandb could not start a run ({_first_line(exc)}); log in with 'wandb login', "
                "or use --logger 'wandb,mode=offline'"
            ) from exc
        if id_file is not None and self._run is not None and not id_file.exists():
            from rlx.files import write_text_atomic

            id_file.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(id_file, self._run.id)
        self._run.define_metric("*", step_metric="env_steps")
        self._info = run

    def log(self, step: int, row: Mapping[str, Any]) -> None:
        """Log the row's finite numbers, with ``env_steps`` (``step``) as their step metric."""
        self._run.log({**numbers(row), "env_steps": step})

    def finish(self, result: Any) -> None:
        """Log the learning curve, the final checkpoint as a model artifact and the stop reason
        (unless the run failed), finish the wandb run (exit code 1 when it failed) and stop wandb's
        service process."""
        if self._run is None:
            return
        import wandb

        try:
            if result is not None:
                curve, final = _artifacts(self._info)
                if curve is not None:
                    self._run.log({"learning_curve": wandb.Image(str(curve))})
                if final is not None:
                    artifact = wandb.Artifact(f"{self._run.id}-final", type="model")
                    artifact.add_dir(str(final))
                    self._run.log_artifact(artifact)
                self._run.summary["stop_reason"] = result.stop_reason
        finally:
            self._run.finish(exit_code=0 if result is not None else 1)
            self._run = None
            wandb.teardown()  # stop wandb's service process: nothing of the run keeps running


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


# -- a table on the console -----------------------------------------------------------------------


class TableLogger:
    """Every current metric as a two-column table (metric, value) on a console, at the first
    row at or after each multiple of ``every`` steps, and at the end when rows came since:
    the newest value of each metric, so a table shows the last evaluation too. The trainer's
    ``table_every`` setting adds one on the run's console; :class:`MetricsLogger` one on
    stdout."""

    #: The arguments that send data outside the run (:mod:`rlx.trust`).
    trust_arguments: ClassVar[dict[str, str]] = {}

    def __init__(self, every: int, console: Any = None) -> None:
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ConfigError(f"a table every {every!r} steps: give a whole number of steps >= 1")
        from rich.console import Console

        self.every = every
        self.console = console if console is not None else Console(highlight=False)
        #: The newest value of every metric logged so far.
        self.latest: dict[str, float] = {}
        self._next = every
        self._step: int | None = None
        self._fresh = False

    def start(self, run: RunInfo) -> None:
        """The first table is due at the first multiple of ``every`` after the step the run
        starts from (where a resumed run picks up)."""
        from rlx.callbacks import next_multiple

        resumed = int((run.resumed or {}).get("env_steps", 0))
        self._next = int(next_multiple(self.every, resumed)) if resumed else self.every

    def log(self, step: int, row: Mapping[str, Any]) -> None:
        """Keep the row's numbers; print the table once ``step`` reaches the next multiple."""
        from rlx.callbacks import next_multiple

        self.latest.update(numbers(row))
        self._step, self._fresh = step, True
        if step >= self._next:
            self.show(step)
            self._next = int(next_multiple(self.every, step))

    def finish(self, result: Any) -> None:
        """A last table of what came after the previous one (unless the run failed)."""
        if result is not None and self._fresh and self._step is not None:
            self.show(self._step)

    def show(self, step: int) -> None:
        """Print the table of :attr:`latest` at ``step``."""
        from rich.table import Table

        table = Table(title=f"step {step:,}", title_justify="left")
        table.add_column("metric")
        table.add_column("value", justify="right")
        for key, value in self.latest.items():
            table.add_row(key, f"{value:,.0f}" if float(value).is_integer() else f"{value:.6g}")
        self.console.print(table)
        self._fresh = False


# -- rlx's loggers for a loop of your own ---------------------------------------------------------


@dataclass(frozen=True)
class Closed:
    """What :meth:`MetricsLogger.close` tells the loggers: the loop ended normally."""

    stop_reason: str = "closed"


class MetricsLogger:
    """rlx's loggers for a training loop of your own: ``directory/metrics.csv``, TensorBoard
    events in ``directory/tensorboard`` (when the ``tensorboard`` switch is on and the package
    installed), the trackers ``loggers`` names (as the trainer setting and ``rlx run
    --logger`` take them: ``"mlflow,experiment=x"``, ``"wandb,mode=offline"``, a plugin's)
    and, with ``table_every``, a table of every current metric on stdout (or ``console``).

    :meth:`write` logs a dict of metrics at a step, as one row with a ``step`` column; every
    number goes to TensorBoard and the trackers under its own name. :meth:`close` finishes
    every logger (a ``with`` block closes it, and marks the trackers' run failed when the block
    raised). ``name``, ``env`` and ``hyperparameters`` are what trackers record of the run.
    A directory that holds a metrics.csv already is refused: nothing is overwritten.
    """

    def __init__(
        self,
        directory: str | Path,
        *,
        loggers: Any = (),
        tensorboard: bool = True,
        table_every: int = 0,
        console: Any = None,
        name: str = "custom",
        env: str = "custom",
        hyperparameters: Mapping[str, Any] | None = None,
    ) -> None:
        from rlx.runs import METRICS_FILE

        self._closed = False
        entries = check_loggers(loggers)
        self.path = Path(directory)
        if (self.path / METRICS_FILE).exists():
            raise ConfigError(
                f"{self.path} holds a {METRICS_FILE} already; log into a new directory"
            )
        configured = build_loggers(entries)
        self.loggers = standard_loggers(
            configured, (entry["name"] for entry in entries), True, tensorboard
        )
        if table_every:
            self.loggers.append(TableLogger(table_every, console))
        for logger in self.loggers:
            if isinstance(logger, TensorBoardLogger):
                logger.all_but = "step"
        identity = RunIdentity(
            agent=str(name), env=str(env), hyperparameters=dict(hyperparameters or {})
        )
        info = RunInfo(self.path, identity, {**identity.to_json(), "trainer": {}})
        self.path.mkdir(parents=True, exist_ok=True)
        started: list[Any] = []
        try:
            for logger in self.loggers:
                logger.start(info)
                started.append(logger)
        except BaseException:
            finish_loggers(started, None, self._warn)
            self.loggers = []
            raise

    def write(self, metrics: Mapping[str, Any], step: int) -> None:
        """Log ``metrics`` (names to numbers) at ``step``, to every logger."""
        if isinstance(step, bool) or not isinstance(step, int):
            raise ConfigError(f"step must be an integer, got {step!r}")
        if not isinstance(metrics, Mapping) or not all(isinstance(k, str) for k in metrics):
            raise ConfigError(f"metrics must be a dict of names to numbers, got {metrics!r}")
        if self._closed:
            raise RlxError(f"the logger of {self.path} is closed")
        log_row(self.loggers, step, {"step": step, **metrics}, self._warn)

    def close(self, failed: bool = False) -> None:
        """Finish every logger once (again: nothing); ``failed`` marks the trackers' run
        failed."""
        self._closed = True
        finish_loggers(self.loggers, None if failed else Closed(), self._warn)

    def __enter__(self) -> MetricsLogger:
        return self

    def __exit__(self, kind: Any, value: Any, traceback: Any) -> None:
        self.close(failed=kind is not None)

    @staticmethod
    def _warn(message: str) -> None:
        import warnings

        warnings.warn(message, RuntimeWarning, stacklevel=3)
