"""Every bash and python block of README.md and of the docs/ pages runs (the conventions and
the budget caps are in ``tests/docs_blocks.py``), and the package READMEs, shown on their own
on the package index, link to nothing outside their package."""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

import docs_blocks
import pytest
from docs_blocks import (
    EPISODES_CAP,
    RESUME_STEPS_CAP,
    STEPS_CAP,
    BlockFailed,
    DocsTestError,
    cap_bash,
    cap_python,
    cap_seeds,
    parse_blocks,
    run_page,
)

REPO_ROOT = docs_blocks.REPO_ROOT
FENCE = "```"


def _page_id(page: Path) -> str:
    return page.relative_to(REPO_ROOT).as_posix()


@pytest.mark.parametrize("page", docs_blocks.pages(), ids=_page_id)
def test_every_block_of_the_page_runs(page: Path, tmp_path: Path):
    blocks = parse_blocks(page.read_text(encoding="utf-8"), _page_id(page))
    if not any(block.runs for block in blocks):
        pytest.skip("no bash or python block to run")
    failure = None
    try:
        run_page(page, tmp_path)
    except BlockFailed as error:
        failure = str(error)
    if failure is not None:
        pytest.fail(failure, pytrace=False)


# --------------------------------------------------------------------------- finding pages


def test_pages_are_the_readme_and_the_written_docs_not_the_generated_ones(tmp_path: Path):
    for name in ("README.md", "docs/index.md", "docs/guide/train.md", "docs/api/rlx.md"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("# page\n")
    for generated in ("agents", "benchmarks", "reference", "_build"):
        (tmp_path / "docs" / generated).mkdir()
        (tmp_path / "docs" / generated / "page.md").write_text("# generated\n")
    found = [page.relative_to(tmp_path).as_posix() for page in docs_blocks.pages(tmp_path)]
    assert found == ["README.md", "docs/guide/train.md", "docs/index.md"]


# --------------------------------------------------------------------------- reading blocks


def test_blocks_come_in_page_order_with_their_language_and_first_line():
    page = f"# title\n\n{FENCE}bash\nrlx list\n{FENCE}\n\ntext\n\n"
    page += f"{FENCE}python\nx = 1\ny = 2\n{FENCE}\n"
    blocks = parse_blocks(page)
    assert [(b.language, b.text, b.line, b.runs) for b in blocks] == [
        ("bash", "rlx list\n", 4, True),
        ("python", "x = 1\ny = 2\n", 10, True),
    ]


def test_other_languages_and_bare_fences_do_not_run():
    page = f"{FENCE}toml\na = 1\n{FENCE}\n{FENCE}\nplain\n{FENCE}\n{FENCE}console\n$ rlx\n{FENCE}\n"
    assert [(b.language, b.runs) for b in parse_blocks(page)] == [
        ("toml", False),
        ("", False),
        ("console", False),
    ]


def test_a_longer_fence_holds_a_shorter_one_as_text():
    page = f"````markdown\n{FENCE}bash\nrlx list\n{FENCE}\n````\n"
    (block,) = parse_blocks(page)
    assert block.language == "markdown"
    assert block.text == f"{FENCE}bash\nrlx list\n{FENCE}\n"


def test_a_fence_in_a_list_item_loses_its_indentation():
    page = f"1. Write it:\n\n   {FENCE}python\n   def f():\n       return 1\n   {FENCE}\n"
    (block,) = parse_blocks(page)
    assert block.text == "def f():\n    return 1\n"


def test_skip_and_file_markers_apply_to_the_next_fence():
    page = (
        f"<!-- docs-test: skip needs a GPU -->\n{FENCE}bash\nrlx run ppo --device cuda\n{FENCE}\n"
        f"<!-- docs-test: file conf/run.toml -->\n{FENCE}toml\nagent = 'sarsa'\n{FENCE}\n"
    )
    skip, file = parse_blocks(page)
    assert (skip.action, skip.argument, skip.runs) == ("skip", "needs a GPU", False)
    assert (file.action, file.argument, file.text) == ("file", "conf/run.toml", "agent = 'sarsa'\n")


@pytest.mark.parametrize(
    ("page", "message"),
    [
        (f"<!-- docs-test: skip -->\n{FENCE}bash\nls\n{FENCE}\n", "needs a reason"),
        (f"<!-- docs-test: skip   -->\n{FENCE}bash\nls\n{FENCE}\n", "needs a reason"),
        (f"<!-- docs-test: skip slow -->\n\n{FENCE}bash\nls\n{FENCE}\n", "not followed by a fence"),
        ("<!-- docs-test: skip slow -->\n", "not followed by a fence"),
        (f"<!-- docs-test: file -->\n{FENCE}toml\n{FENCE}\n", "relative name"),
        (f"<!-- docs-test: file ../up.toml -->\n{FENCE}toml\n{FENCE}\n", "relative name"),
        (f"<!-- docs-test: file /etc/x -->\n{FENCE}toml\n{FENCE}\n", "relative name"),
        (f"<!-- docs-test: skipp slow -->\n{FENCE}bash\nls\n{FENCE}\n", "unknown docs-test marker"),
        (f"{FENCE}bash\nls\n", "never closed"),
    ],
)
def test_a_wrong_marker_or_fence_is_an_error_naming_the_line(page: str, message: str):
    with pytest.raises(DocsTestError, match=message) as error:
        parse_blocks(page, "docs/page.md")
    assert str(error.value).startswith("docs/page.md:1:")


def test_a_marker_shown_inside_a_block_is_text():
    page = f"````markdown\n<!-- docs-test: skip -->\n{FENCE}bash\n{FENCE}\n````\n"
    assert parse_blocks(page)[0].action == "run"


# --------------------------------------------------------------------------- capping budgets


EVALS = f"--eval-episodes {EPISODES_CAP}"  # what a new run gets where it has none
NEW_RUN = f"--steps {STEPS_CAP} {EVALS}"  # and a run with neither


@pytest.mark.parametrize(
    ("command", "capped"),
    [
        ("rlx run ppo --steps 200000", f"rlx run {EVALS} ppo --steps {STEPS_CAP}"),
        ("rlx run ppo --steps=200_000", f"rlx run {EVALS} ppo --steps={STEPS_CAP}"),
        ("rlx run ppo --steps 10 --eval-episodes 1", "rlx run ppo --steps 10 --eval-episodes 1"),
        ("rlx run ppo --env CartPole-v1", f"rlx run {NEW_RUN} ppo --env CartPole-v1"),
        ("rlx run --config run.toml", f"rlx run {NEW_RUN} --config run.toml"),
        (".venv/bin/rlx run dqn", f".venv/bin/rlx run {NEW_RUN} dqn"),
        ("rlx --debug run dqn", f"rlx --debug run {NEW_RUN} dqn"),
        ("(X=1 time rlx run dqn)", f"(X=1 time rlx run {NEW_RUN} dqn)"),
        ("rlx run a --eval-episodes 100", f"rlx run --steps {STEPS_CAP} a {EVALS}"),
        (
            "rlx run --resume runs/taxi --steps 400000",
            f"rlx run --resume runs/taxi --steps {RESUME_STEPS_CAP}",
        ),
        ("rlx run --resume runs/taxi", "rlx run --resume runs/taxi"),
        ("rlx run q --seeds 0-15 --jobs 4", f"rlx run {NEW_RUN} q --seeds 0-1 --jobs 2"),
        ("rlx run q --seeds '3,7,9'", f"rlx run {NEW_RUN} q --seeds '3,7'"),
        (
            "rlx tune q --trials 30 --steps 20000 --seeds 3",
            f"rlx tune {EVALS} q --trials 2 --steps {STEPS_CAP} --seeds 2",
        ),
        ("rlx tune q --env E", f"rlx tune {NEW_RUN} q --env E"),
        ("rlx eval runs/taxi --episodes 100 --json", "rlx eval runs/taxi --episodes 3 --json"),
        ("rlx eval runs/taxi --json", "rlx eval --episodes 3 runs/taxi --json"),
        ("rlx list --steps 5", "rlx list --steps 5"),
        ("python train.py --steps 100000", "python train.py --steps 100000"),
        ("echo rlx run ppo --steps 99999", "echo rlx run ppo --steps 99999"),
    ],
)
def test_rlx_budgets_are_capped(command: str, capped: str):
    assert cap_bash(command) == capped


def test_comments_are_never_rewritten_nor_read():
    script = "rlx plot runs/x   # and --resume --steps 99999\n"
    assert cap_bash(script) == script
    assert cap_bash("rlx run ppo  # resumes with --resume\n") == (
        f"rlx run {NEW_RUN} ppo  # resumes with --resume\n"
    )
    assert cap_bash("echo '# rlx run --steps 99999'\n") == "echo '# rlx run --steps 99999'\n"


def test_each_command_of_a_line_and_a_continued_command_are_capped():
    script = textwrap.dedent(
        """\
        rlx run a --steps 5000 && rlx eval a --episodes 50; rlx run b 2>&1 | tail
        rlx run c \\
          --steps 300000 --seeds 0-3 \\
          --out runs/c
        """
    )
    cap = STEPS_CAP
    assert cap_bash(script) == textwrap.dedent(
        f"""\
        rlx run {EVALS} a --steps {cap} && rlx eval a --episodes 3; rlx run {NEW_RUN} b 2>&1 | tail
        rlx run {EVALS} c \\
          --steps {cap} --seeds 0-1 \\
          --out runs/c
        """
    )


@pytest.mark.parametrize(
    ("spec", "capped"),
    [("0-15", "0-1"), ("5", "5"), ("0,3,7", "0,3"), ("9,0-3", "9,0"), ("x-1", "x-1")],
)
def test_a_seed_spec_keeps_its_first_seeds(spec: str, capped: str):
    assert cap_seeds(spec) == capped


def test_python_budgets_are_capped_and_a_resume_gets_room_to_go_on():
    source = textwrap.dedent(
        """\
        trainer = rlx.Trainer(agent, steps=200_000, eval_every=20_000)
        group = new_group("q", "Taxi-v4", seeds="0-7", settings={"steps": 200_000})
        rlx.Trainer.resume("runs/x", steps = 400_000).fit()
        rlx.evaluate(agent, env, episodes=100)
        assert trainer.steps == 5000000 and trainer.episodes >= 100
        config.steps = 300000; rlx.make(n_steps=2048, max_episode_steps=10000, eval_episodes=100)
        """
    )
    assert cap_python(source) == textwrap.dedent(
        f"""\
        trainer = rlx.Trainer(agent, steps={STEPS_CAP}, eval_every=20_000)
        group = new_group("q", "Taxi-v4", seeds="0-1", settings={{"steps": {STEPS_CAP}}})
        rlx.Trainer.resume("runs/x", steps = {RESUME_STEPS_CAP}).fit()
        rlx.evaluate(agent, env, episodes={EPISODES_CAP})
        assert trainer.steps == 5000000 and trainer.episodes >= 100
        config.steps = 300000; rlx.make(n_steps=2048, max_episode_steps=10000, eval_episodes=3)
        """
    )


# --------------------------------------------------------------------------- running a page


def _page(tmp_path: Path, text: str) -> Path:
    page = tmp_path / "page.md"
    page.write_text(textwrap.dedent(text))
    return page


def test_blocks_share_the_scratch_directory_and_python_blocks_one_namespace(tmp_path: Path):
    page = _page(
        tmp_path,
        f"""\
        <!-- docs-test: file conf/run.toml -->
        {FENCE}toml
        steps = 3
        {FENCE}

        {FENCE}bash
        cat conf/run.toml > copied.toml  # a comment
        echo "$CI $MPLBACKEND" > env.txt
        echo "HOME=$HOME" >> env.txt
        {FENCE}

        {FENCE}python
        import pathlib
        text = pathlib.Path("copied.toml").read_text()
        {FENCE}

        {FENCE}python
        assert text == "steps = 3\\n" and __name__ == "__main__"
        import os
        assert os.environ["CI"] == "true"
        {FENCE}
        """,
    )
    cwd = os.getcwd()
    assert run_page(page, tmp_path / "run", root=tmp_path) == 3
    assert os.getcwd() == cwd
    lines = (tmp_path / "run" / "work" / "env.txt").read_text().splitlines()
    assert lines == ["true Agg", f"HOME={tmp_path / 'run' / 'home'}"]


def test_a_module_written_by_a_file_block_imports_and_is_forgotten_afterwards(tmp_path: Path):
    page = _page(
        tmp_path,
        f"""\
        <!-- docs-test: file docs_test_scratch_module.py -->
        {FENCE}python
        VALUE = 7
        {FENCE}

        {FENCE}python
        from docs_test_scratch_module import VALUE
        assert VALUE == 7
        {FENCE}

        {FENCE}bash
        python -c "import docs_test_scratch_module"
        {FENCE}
        """,
    )
    run_page(page, tmp_path / "run", root=tmp_path)
    assert "docs_test_scratch_module" not in __import__("sys").modules


def test_a_module_of_the_same_name_imported_by_another_test_does_not_shadow_the_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    import sys
    import types

    stale = types.ModuleType("docs_test_nets")
    stale.__file__ = str(tmp_path / "elsewhere" / "docs_test_nets.py")
    monkeypatch.setitem(sys.modules, "docs_test_nets", stale)
    page = _page(
        tmp_path,
        f"""\
        <!-- docs-test: file docs_test_nets.py -->
        {FENCE}python
        def encoder():
            return "the page's"
        {FENCE}

        {FENCE}python
        from docs_test_nets import encoder
        assert encoder() == "the page's"
        {FENCE}
        """,
    )
    run_page(page, tmp_path / "run", root=tmp_path)


def test_a_failing_bash_block_names_the_page_line_command_and_stderr(tmp_path: Path):
    page = _page(
        tmp_path,
        f"""\
        # title

        {FENCE}bash
        echo fine
        ls no-such-file   # fails
        echo never
        {FENCE}
        """,
    )
    with pytest.raises(BlockFailed) as failure:
        run_page(page, tmp_path / "run", root=tmp_path)
    message = str(failure.value)
    assert message.startswith("page.md:4: bash block failed, exit code 2")
    assert "failed command (page line 5): ls no-such-file" in message
    assert "No such file or directory" in message


def test_a_failing_pipeline_fails_the_block(tmp_path: Path):
    page = _page(tmp_path, f"{FENCE}bash\nfalse | cat\n{FENCE}\n")
    with pytest.raises(BlockFailed, match="exit code 1"):
        run_page(page, tmp_path / "run", root=tmp_path)


def test_a_bash_block_past_its_time_is_stopped(tmp_path: Path):
    page = _page(tmp_path, f"{FENCE}bash\nsleep 30\n{FENCE}\n")
    with pytest.raises(BlockFailed, match=r"timed out after 0\.5 s"):
        run_page(page, tmp_path / "run", timeout=0.5, root=tmp_path)


def test_a_failing_python_block_shows_the_traceback_with_the_page_line(tmp_path: Path):
    page = _page(
        tmp_path,
        f"""\
        {FENCE}python
        print("before")
        x = undefined_name
        {FENCE}
        """,
    )
    cwd = os.getcwd()
    with pytest.raises(BlockFailed) as failure:
        run_page(page, tmp_path / "run", root=tmp_path)
    message = str(failure.value)
    assert message.startswith("page.md:2: python block failed: NameError")
    assert 'File "page.md", line 3' in message
    assert "before" in message
    assert os.getcwd() == cwd


def test_a_python_block_past_its_time_is_stopped(tmp_path: Path):
    page = _page(tmp_path, f"{FENCE}python\nimport time\ntime.sleep(30)\n{FENCE}\n")
    with pytest.raises(BlockFailed, match=r"timed out after 0\.5 s"):
        run_page(page, tmp_path / "run", timeout=0.5, root=tmp_path)


def test_skipped_blocks_do_not_run(tmp_path: Path):
    page = _page(
        tmp_path, f"<!-- docs-test: skip shows a failure -->\n{FENCE}bash\nfalse\n{FENCE}\n"
    )
    assert run_page(page, tmp_path / "run", root=tmp_path) == 0


# --------------------------------------------------------------------------- package READMEs

PACKAGE_READMES = sorted(
    [*REPO_ROOT.glob("packages/*/README.md"), *REPO_ROOT.glob("examples/*/README.md")]
)
LINK_TARGETS = (
    re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)"),  # [text](target), ![alt](target)
    re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.MULTILINE),  # [label]: target
    re.compile(r"""\b(?:href|src)\s*=\s*["']([^"']+)"""),  # HTML
)


def _prose(text: str) -> str:
    """``text`` without its fenced blocks and inline code, where brackets are not links."""
    kept, fence = [], None
    for line in text.splitlines():
        match = docs_blocks.FENCE.match(line)
        if fence is None and match:
            fence = match["fence"]
        elif fence is not None and match and not match["info"] and match["fence"].startswith(fence):
            fence = None
        elif fence is None:
            kept.append(re.sub(r"`+[^`]*`+", "", line))
    return "\n".join(kept)


def links_leaving(readme: Path) -> list[str]:
    """The links of ``readme`` that point outside its package folder (or at an absolute path)."""
    folder = readme.parent.resolve()
    leaving = []
    for pattern in LINK_TARGETS:
        for target in pattern.findall(_prose(readme.read_text(encoding="utf-8"))):
            if re.match(r"[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) or target.startswith("#"):
                continue  # https://..., mailto:..., an anchor of the page
            path = target.split("#")[0].split("?")[0]
            if path.startswith("/") or not (folder / path).resolve().is_relative_to(folder):
                leaving.append(target)
    return leaving


@pytest.mark.parametrize("readme", PACKAGE_READMES, ids=_page_id)
def test_a_package_readme_links_only_inside_its_package(readme: Path):
    leaving = links_leaving(readme)
    assert not leaving, (
        f"{_page_id(readme)} is shown on its own on the package index, where these links lead "
        f"nowhere; name the file in the rlx repository as text instead: {leaving}"
    )


def test_links_leaving_a_package_are_found(tmp_path: Path):
    readme = tmp_path / "pkg" / "README.md"
    readme.parent.mkdir()
    readme.write_text(
        "[core](../core) [top](../../README.md) [here](docs/x.md) [site](https://example.org)\n"
        "[anchor](#usage) ![plot](/abs/plot.png) <a href='../shared/a.md'>a</a>\n"
        "[ref]: ../benchmarks/results/standard.md\n"
        f"`[not a link](../x)`\n{FENCE}python\nx = a[0](../y)\n{FENCE}\n"
    )
    assert sorted(links_leaving(readme)) == sorted(
        [
            "../core",
            "../../README.md",
            "/abs/plot.png",
            "../benchmarks/results/standard.md",
            "../shared/a.md",
        ]
    )
