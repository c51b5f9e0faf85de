"""fedcluster.proto: the protobuf contract for run results.

``cluster_model.proto`` defines the ``model.pb`` file format: a
``ModelFile`` envelope (format name, format version, SHA-256 checksum) around
a serialized ``ClusterModel``; ``cluster_model_pb2`` is generated from it by
``python -m fedcluster.proto.generate``. Import the messages from
``fedcluster.proto.cluster_model_pb2``: this package module deliberately
imports nothing, so the generator still runs when the generated code is
missing or out of date.
"""
