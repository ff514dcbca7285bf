"""Reading values out of other log layouts (crosssim/real/convert.py, layout.py): a step's value
as numbers, and the messages of an MCAP file (ROS 2 CDR through ``mcap-ros2-support``, JSON
channels), each failure one line naming the file or the step."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from crosssim.real.logs import LogError


def numbers(value, group: str, where: str) -> np.ndarray:
    """A step's value as a flat float vector; LogError naming the step and the key for anything
    else (text, null, a mapping, nested lists): one line, never a traceback."""
    try:  # null would become NaN
        out = None if value is None else np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        out = None
    if out is None or out.ndim > 1:
        raise LogError(f"{where}: '{group}' must be a number or a list of numbers, got {shown(value)}")
    return np.atleast_1d(out)


def shown(value) -> str:
    """A value quoted in a message, at most 60 characters (any nesting depth)."""
    try:
        return json.dumps(value)[:60]
    except (RecursionError, TypeError, ValueError):
        return f"a nested {type(value).__name__}"


class _JsonDecoders:
    """Decoders for JSON-encoded MCAP messages (foxglove's JSON channels)."""

    def decoder_for(self, message_encoding, schema):
        return (lambda data: json.loads(data)) if message_encoding == "json" else None


def messages(path: Path, topics: list[str]):
    """(topic, receive time [ns], decoded message) of every message on ``topics``, in receive order."""
    try:
        from mcap.reader import make_reader
    except ImportError:
        raise LogError("reading MCAP files needs the mcap library: pip install 'crosssim[ros]'") from None
    factories = [_JsonDecoders()]
    try:
        from mcap_ros2.decoder import DecoderFactory

        factories.insert(0, DecoderFactory())
    except ImportError:  # CDR (ROS 2) messages then fail below with the install hint
        pass
    try:
        with open(path, "rb") as f:
            reader = make_reader(f, decoder_factories=factories)
            for schema, channel, message, decoded in reader.iter_decoded_messages(topics=topics):
                yield channel.topic, message.log_time, decoded
    except LogError:
        raise
    except Exception as exc:  # the mcap library's own error types: a damaged file or an unknown encoding
        hint = " (ROS 2 CDR messages need: pip install 'crosssim[ros]')" if "decoder" in str(exc).lower() else ""
        raise LogError(f"{path}: cannot be read as MCAP ({type(exc).__name__}: {str(exc)[:160]}){hint}") from None
