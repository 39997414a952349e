"""What the public samplers share (none of it imports a public sampler module).

* the model as batched NumPy functions: ``compile`` (with ``gradients``, ``rewrites``,
  ``reproducible``, ``memory``, ``jax_data``), ``prior`` (with ``vectorize``), ``mapping``,
  ``model_info``, ``term_checks``;
* the run's set-up and finish: ``options``, ``pipeline``, ``kernel_choice``,
  ``init_option``, ``init_auto``, ``path_option``, ``tuning``;
* the chains: one chain module per kind (``anneal_chain``, ``rts_chain``, ``mcd_chain``),
  run by ``runner`` (``chain_batch`` with JAX; ``progress``).

See docs/architecture.md.
"""
