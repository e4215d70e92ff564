"""The one detection path: a request and a cube in, scores, mask, objects and evaluation out."""
