import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RoundRecord(_message.Message):
    __slots__ = ("restart", "round", "movement", "score", "clients_sampled", "clients_answered", "clients_rejected", "participants", "phase", "epsilon", "rejections")
    RESTART_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    MOVEMENT_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    CLIENTS_SAMPLED_FIELD_NUMBER: _ClassVar[int]
    CLIENTS_ANSWERED_FIELD_NUMBER: _ClassVar[int]
    CLIENTS_REJECTED_FIELD_NUMBER: _ClassVar[int]
    PARTICIPANTS_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    REJECTIONS_FIELD_NUMBER: _ClassVar[int]
    restart: int
    round: int
    movement: float
    score: float
    clients_sampled: int
    clients_answered: int
    clients_rejected: int
    participants: _containers.RepeatedScalarFieldContainer[int]
    phase: str
    epsilon: float
    rejections: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, restart: _Optional[int] = ..., round: _Optional[int] = ..., movement: _Optional[float] = ..., score: _Optional[float] = ..., clients_sampled: _Optional[int] = ..., clients_answered: _Optional[int] = ..., clients_rejected: _Optional[int] = ..., participants: _Optional[_Iterable[int]] = ..., phase: _Optional[str] = ..., epsilon: _Optional[float] = ..., rejections: _Optional[_Iterable[str]] = ...) -> None: ...

class SettingValue(_message.Message):
    __slots__ = ("bool_value", "int_value", "double_value", "string_value")
    BOOL_VALUE_FIELD_NUMBER: _ClassVar[int]
    INT_VALUE_FIELD_NUMBER: _ClassVar[int]
    DOUBLE_VALUE_FIELD_NUMBER: _ClassVar[int]
    STRING_VALUE_FIELD_NUMBER: _ClassVar[int]
    bool_value: bool
    int_value: int
    double_value: float
    string_value: str
    def __init__(self, bool_value: _Optional[bool] = ..., int_value: _Optional[int] = ..., double_value: _Optional[float] = ..., string_value: _Optional[str] = ...) -> None: ...

class ClusterModel(_message.Message):
    __slots__ = ("fedcluster_version", "algorithm", "created", "n_clusters", "dimension", "centroids", "counts", "score", "rounds", "converged", "best_restart", "settings", "history", "n_points", "shift", "scale", "stop_reason")
    class SettingsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: SettingValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[SettingValue, _Mapping]] = ...) -> None: ...
    FEDCLUSTER_VERSION_FIELD_NUMBER: _ClassVar[int]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    N_CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    CENTROIDS_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    CONVERGED_FIELD_NUMBER: _ClassVar[int]
    BEST_RESTART_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    N_POINTS_FIELD_NUMBER: _ClassVar[int]
    SHIFT_FIELD_NUMBER: _ClassVar[int]
    SCALE_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    fedcluster_version: str
    algorithm: str
    created: _timestamp_pb2.Timestamp
    n_clusters: int
    dimension: int
    centroids: _containers.RepeatedScalarFieldContainer[float]
    counts: _containers.RepeatedScalarFieldContainer[float]
    score: float
    rounds: int
    converged: bool
    best_restart: int
    settings: _containers.MessageMap[str, SettingValue]
    history: _containers.RepeatedCompositeFieldContainer[RoundRecord]
    n_points: int
    shift: _containers.RepeatedScalarFieldContainer[float]
    scale: _containers.RepeatedScalarFieldContainer[float]
    stop_reason: str
    def __init__(self, fedcluster_version: _Optional[str] = ..., algorithm: _Optional[str] = ..., created: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., n_clusters: _Optional[int] = ..., dimension: _Optional[int] = ..., centroids: _Optional[_Iterable[float]] = ..., counts: _Optional[_Iterable[float]] = ..., score: _Optional[float] = ..., rounds: _Optional[int] = ..., converged: _Optional[bool] = ..., best_restart: _Optional[int] = ..., settings: _Optional[_Mapping[str, SettingValue]] = ..., history: _Optional[_Iterable[_Union[RoundRecord, _Mapping]]] = ..., n_points: _Optional[int] = ..., shift: _Optional[_Iterable[float]] = ..., scale: _Optional[_Iterable[float]] = ..., stop_reason: _Optional[str] = ...) -> None: ...

class ModelFile(_message.Message):
    __slots__ = ("format", "format_version", "sha256", "model")
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    FORMAT_VERSION_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    format: str
    format_version: int
    sha256: bytes
    model: bytes
    def __init__(self, format: _Optional[str] = ..., format_version: _Optional[int] = ..., sha256: _Optional[bytes] = ..., model: _Optional[bytes] = ...) -> None: ...
