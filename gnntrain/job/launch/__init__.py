"""Launching a checked job: preparing it (:mod:`.prepare`: its layout, what it resumes, its data and
the memory it will need) and starting its ranks (:mod:`.start`): spawned on this machine
(:mod:`.spawn`, forked from a fork server, :mod:`.fork_server`), or joining the world torchrun or
a submitit job started (:mod:`.join`); every rank starts the same way (:mod:`.rank`). The data is
loaded once per job, or per node under torchrun (:mod:`.data`)."""
