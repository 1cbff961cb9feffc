"""The offline side: MILP and LP models solved with HiGHS (:mod:`~psched.offline.milp`), and
the exact offline optimum of problem (1)-(13) with its bounds (:mod:`~psched.offline.optimum`)."""
