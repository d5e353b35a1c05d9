"""The OpenSearch client's JSON (orjson) writes the values the standard serializer
writes (the same numbers to the last bit; only an exponent's spelling may differ)."""

from __future__ import annotations

import datetime
import json
import uuid
from decimal import Decimal

import numpy as np
import pytest
from opensearchpy.exceptions import SerializationError
from opensearchpy.serializer import JSONSerializer

from groundwire.stores.opensearch.client import FastJSON, OpenSearchSettings, open_client


def test_bulk_actions_serialize_as_the_standard_serializer_does() -> None:
    vector = np.array([0.1, -2.5, 3.0e-8, 1.0], dtype=np.float32)
    action = {
        "_id": "t\x00doc/1",
        "terms": "grün 東京 zyxquartz",
        "embedding": vector.tolist(),
        "meta": {"dept": "hr", "n": 3},
        "acl": ["group:hr", "user:alice@example.com"],
        "flag": True,
        "none": None,
    }
    fast, standard = FastJSON(), JSONSerializer()
    text = fast.dumps(action)
    assert json.loads(text) == json.loads(standard.dumps(action)) == fast.loads(text)
    assert "東京" in text and " " not in text.replace("grün 東京 zyxquartz", "")
    # numpy values, dates, UUIDs and decimals are written as the standard one writes them.
    extras = {
        "array": vector,
        "scalar": np.float32(0.5),
        "int": np.int64(7),
        "when": datetime.datetime(2026, 12, 6, 21, 0, tzinfo=datetime.UTC),
        "id": uuid.UUID(int=5),
        "amount": Decimal("1.5"),
    }
    assert json.loads(fast.dumps(extras)) == json.loads(standard.dumps(extras))
    # Strings and bytes pass through; what cannot be written is a SerializationError.
    assert fast.dumps("raw") == "raw" and fast.dumps(b"raw") == b"raw"
    with pytest.raises(SerializationError):
        fast.dumps({"x": object()})
    with pytest.raises(SerializationError):
        fast.loads("{not json")


def test_the_client_uses_it() -> None:
    client = open_client(OpenSearchSettings(hosts=("http://127.0.0.1:1",)))
    assert isinstance(client.transport.serializer, FastJSON)
