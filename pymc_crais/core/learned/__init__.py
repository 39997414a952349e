"""Annealing with learned parameters, trained by the ELBO: ULA / UHA (``ula``, its
parameters ``ula_params``, its targets ``langevin_targets``), MCD's score network
(``mcd``), and the optimizer (``adam``). NumPy only."""
