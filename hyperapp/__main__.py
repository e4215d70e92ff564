import sys

from hyperapp.cli import main

sys.exit(main())
