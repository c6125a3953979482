"""Files: atomic writes (:mod:`~gnntrain.storage.files`), files read without running code
(:mod:`~gnntrain.storage.safe_load`), the cache folder (:mod:`~gnntrain.storage.cache`),
temporary folders named by their process (:mod:`~gnntrain.storage.process_folders`)."""
