"""Example models for torchscribe: each file defines a @script model and make_example()."""
