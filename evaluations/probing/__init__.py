"""Probing: which layer of a model encodes a property of the sentence, above baselines.

The worker side is pure Python + torch, no Django (like `evaluations.scoring`): `extract`
(hidden states), `probes`, and `run.probe_task`, which the worker and the `probe` command
both call. The site's side is the kind's package: services, selectors, views, api. This
file imports nothing, so that the web processes never load torch.
"""
