"""A torchrun job whose rank 1 crashes during the first attempt: with
--max-restarts=1 the agent restarts the whole job, which then completes."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
import torch.distributed as dist  # noqa: E402

import ddp_train  # noqa: E402

attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
print(f"attempt {attempt} rank {os.environ['RANK']} started", flush=True)
if attempt == "0" and os.environ["RANK"] == "1":
    dist.init_process_group("neuron")
    os._exit(7)  # dies after joining: the other rank must not hang
ddp_train.main()
