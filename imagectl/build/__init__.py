"""The builder: build contexts -> images on a Docker engine, checked, tagged and pushed."""
