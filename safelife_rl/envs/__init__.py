"""The envs floor, on the engine: the Gymnasium env (:mod:`.env`), the PettingZoo env
(:mod:`.multi_agent_env`), which level each episode plays (:mod:`.level_stream`), the Gymnasium
vector env on a torch device (:mod:`.vector_env`; its pure step :mod:`.vector_step`, its state
and step params :mod:`.vector_state`), the reward wrappers of the original training code
(:mod:`.wrappers`, their batched rules :mod:`.torch_wrappers`, :mod:`.schedules`), registration
of the ids (:mod:`.registration`) and rendering (:mod:`.render`, :mod:`.video`)."""
