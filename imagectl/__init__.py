"""imagectl: GPU training images from a compatibility matrix, built, tested, tagged and rolled back."""

__version__ = "0.1.0"
