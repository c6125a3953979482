"""The job path, from the overrides a user gives to the ranks that train: :mod:`.api` (compose,
check, calibrate, run: one way to run a config for every caller), :mod:`.composition` and
:mod:`.validation` (the typed config and every check before any worker starts), :mod:`.calibration`
and :mod:`.memory` (the link a share asks for, the memory a rank will need), :mod:`.sweep` and
:mod:`.help` (sweeps and ``--help``), :mod:`.run_dir`, :mod:`.startup` (the launcher's start-up
phases, with a test hook), and :mod:`.launch` (preparing a checked job
and starting its ranks). It imports nothing when imported itself: ``--help`` reads its help and
composition without torch."""
