"""The public errors: one base, the documented bases of each, and every one intact across a process boundary."""

import pickle

import casstore


def test_every_public_error_derives_from_cas_store_error_and_survives_pickling() -> None:
    """Errors cross process boundaries (multiprocessing, concurrent.futures) with their message and attributes."""
    errors = [getattr(casstore, name) for name in casstore.__all__ if name.endswith("Error")]
    # Exactly the error table of docs/store.md, each with the bases it documents.
    assert {error.__name__: error.__bases__ for error in errors} == {
        "CasStoreError": (Exception,),
        "InvalidContentError": (casstore.CasStoreError, ValueError),
        "InvalidKeyError": (casstore.CasStoreError, ValueError),
        "InvalidReferenceError": (casstore.CasStoreError, ValueError),
        "ReferenceNotFoundError": (casstore.CasStoreError, FileNotFoundError),
        "CorruptBlobError": (casstore.CasStoreError, OSError),
        "UnsafeBlobError": (casstore.CorruptBlobError, casstore.ReferenceNotFoundError),
        "SchemaError": (casstore.CasStoreError,),
        "IndexDamagedError": (casstore.SchemaError, casstore.CorruptBlobError),
        "StorageError": (casstore.CasStoreError, OSError),
        "ReadOnlyStoreError": (casstore.StorageError,),
        "StoreClosedError": (casstore.CasStoreError,),
        "SearchUnavailableError": (casstore.CasStoreError,),
        "BlobLocationError": (casstore.CasStoreError, ValueError),
    }
    for error_class in errors:
        assert issubclass(error_class, casstore.CasStoreError)
        error = error_class("what went wrong")
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is error_class and str(copy) == "what went wrong"
    corrupt = pickle.loads(pickle.dumps(casstore.CorruptBlobError("gone", digest="ab" * 32, missing=True)))
    assert (corrupt.digest, corrupt.missing) == ("ab" * 32, True)
