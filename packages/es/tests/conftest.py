"""One thread for torch and BLAS in every rlx-es test: the CI machines have two cores."""

from __future__ import annotations

import torch

torch.set_num_threads(1)
