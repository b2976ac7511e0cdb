from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import safelife_rl.training  # noqa: F401  (config resolvers and schema)
from safelife_rl.envs.registration import ORIGINAL_SUITES_DIR


@pytest.fixture(scope="session")
def benchmarks() -> Path:
    """The original SafeLife v1.0 suites, shipped with the package."""
    return ORIGINAL_SUITES_DIR


CONF = Path(__file__).resolve().parents[2] / "safelife_rl" / "conf"
# A few hundred steps with a small network: 17x17 view (the CNN's smallest), thin layers.
TINY = [
    "experiment=paper",
    "env=append-still",
    "env.kwargs.view_shape=[17,17]",
    "env.kwargs.time_limit=30",
    "policy.kwargs.features_extractor_kwargs.features_dim=16",
    "policy.kwargs.features_extractor_kwargs.conv_channels=[4,8,8]",
    "n_envs=2",
    "progress_bar=false",
    "algo.n_steps=16",  # vec_env=auto: batched
    "callbacks.evaluation.n_episodes=2",
    "callbacks.evaluation.eval_every=64",
    "callbacks.checkpoint.save_every=64",
    "callbacks.checkpoint.keep=0",
]


def config(*overrides, return_hydra_config=False):
    with initialize_config_dir(str(CONF), version_base=None):
        return compose(
            "train", overrides=[*TINY, *overrides], return_hydra_config=return_hydra_config
        )


def scalars(folder):
    events = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    events.Reload()
    return {tag: events.Scalars(tag) for tag in events.Tags()["scalars"]}


@pytest.fixture
def train_config():
    """``train_config(*overrides)``: the training app's config for a tiny run."""
    return config


@pytest.fixture
def tb_scalars():
    """``tb_scalars(folder)``: every scalar event of a TensorBoard folder, by tag."""
    return scalars


def _torch_devices() -> list[str]:
    import torch

    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(params=_torch_devices())
def torch_device(request) -> str:
    """Each torch device this machine has: the CPU, and CUDA where there is a GPU (so the
    device tests run on an accelerator wherever one is present, and on the CPU everywhere)."""
    return request.param


@pytest.fixture(scope="module")
def torch_one_thread():
    """Torch on one thread for a module (small batches: on a shared 2-core machine torch's
    thread pool only waits)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
