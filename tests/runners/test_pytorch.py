"""The PyTorch runner's thread count holds for its own calls only: PyTorch's count is
process-wide, and a runner never leaves it changed."""

import numpy as np
import torch

from aft_export.runners import TorchRunner
from tests.export.test_exporter import make_ckpt


def test_threads_are_set_for_each_call_and_restored(tmp_path, monkeypatch):
    path = make_ckpt(tmp_path / "tiny.pt", "aft_conv_test")
    before = torch.get_num_threads()
    want = 1 if before > 1 else 2
    seen = []
    runner = TorchRunner(str(path), threads=want)
    assert runner.threads == want and torch.get_num_threads() == before  # made, nothing set
    real = runner.model.forward
    monkeypatch.setattr(runner.model, "forward", lambda x: (seen.append(torch.get_num_threads()), real(x))[1])
    x = np.zeros((2, *runner.info.input_size), np.float32)
    runner.run({runner.input_name: x})
    assert seen == [want] and torch.get_num_threads() == before
    # 0: the count the process has, whatever it is at the call
    default = TorchRunner(str(path), loaded=(runner.model, runner.meta))
    assert default.threads == before
    default.run({default.input_name: x})
    assert seen == [want, before] and torch.get_num_threads() == before
