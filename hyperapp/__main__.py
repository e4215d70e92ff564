from hyperapp.cli import entry

entry()
