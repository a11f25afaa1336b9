"""The frozen app's entry point: the same `main()` as the `letterpress` console script."""

import multiprocessing
import sys

if __name__ == "__main__":
    multiprocessing.freeze_support()  # a frozen child process must not start a second editor window
    from app.__main__ import main

    sys.exit(main())
