"""``python -m gnntrain.repro <paper>``: a paper's tables (:mod:`gnntrain.repro.build`)."""

from gnntrain.repro.build import main

main()
