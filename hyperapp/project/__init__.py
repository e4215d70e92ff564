"""What the window has open (cube, regions of interest, runs), saved and reopened as a project."""
