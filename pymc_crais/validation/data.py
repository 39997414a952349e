"""Small real data sets typed in from their published tables (public facts), for the suite.

* ``CHALLENGER``: the 23 pre-accident Space Shuttle launches: launch temperature (°F) and
  whether any O-ring showed thermal distress (Dalal, Fowlkes & Hoadley 1989, JASA 84).
* ``BEETLES``: Bliss (1935) beetle mortality after 5 h of gaseous carbon disulphide:
  log10 dose, number exposed, number killed (8 groups; as tabled in Dobson, *An Introduction
  to Generalized Linear Models*).
* ``COAL_DISASTERS``: British coal-mining disasters per year, 1851-1961 (Jarrett 1979), the
  series of PyMC's switchpoint example, with its two missing years as ``nan``.
* ``EIGHT_SCHOOLS``: estimated coaching effects and their standard errors in eight schools
  (Rubin 1981).
"""

from __future__ import annotations

import numpy as np

__all__ = ["BEETLES", "CHALLENGER", "COAL_DISASTERS", "COAL_YEARS", "EIGHT_SCHOOLS"]

# (temperature °F, distress 0/1)
CHALLENGER = np.array(
    [
        (66, 0), (70, 1), (69, 0), (68, 0), (67, 0), (72, 0), (73, 0), (70, 0),
        (57, 1), (63, 1), (70, 1), (78, 0), (67, 0), (53, 1), (67, 0), (75, 0),
        (70, 0), (81, 0), (76, 0), (79, 0), (75, 1), (76, 0), (58, 1),
    ],
    dtype=float,
)  # fmt: skip

# (log10 dose, exposed, killed)
BEETLES = np.array(
    [
        (1.6907, 59, 6), (1.7242, 60, 13), (1.7552, 62, 18), (1.7842, 56, 28),
        (1.8113, 63, 52), (1.8369, 59, 53), (1.8610, 62, 61), (1.8839, 60, 60),
    ]
)  # fmt: skip

COAL_DISASTERS = np.array(
    [4, 5, 4, 0, 1, 4, 3, 4, 0, 6, 3, 3, 4, 0, 2, 6,
     3, 3, 5, 4, 5, 3, 1, 4, 4, 1, 5, 5, 3, 4, 2, 5,
     2, 2, 3, 4, 2, 1, 3, np.nan, 2, 1, 1, 1, 1, 3, 0, 0,
     1, 0, 1, 1, 0, 0, 3, 1, 0, 3, 2, 2, 0, 1, 1, 1,
     0, 1, 0, 1, 0, 0, 0, 2, 1, 0, 0, 0, 1, 1, 0, 2,
     3, 3, 1, np.nan, 2, 1, 1, 1, 1, 2, 4, 2, 0, 0, 1, 4,
     0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 1]
)  # fmt: skip
COAL_YEARS = np.arange(1851, 1962)

EIGHT_SCHOOLS = {
    "y": np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0]),
    "sigma": np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0]),
}
