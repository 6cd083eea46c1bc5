"""cosim: packet-level ns-3 co-simulation of LLM training traffic on RoCE and InfiniBand fabrics.

Kept import-light on purpose (no numpy, h5py or cppyy here) so that ``cosim --help`` answers at once.
"""

__version__ = "0.1.0"
