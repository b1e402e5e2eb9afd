"""The learned encodings' upkeep for the `Repository`'s writer: a dictionary trained after a write, when one is due."""

import logging

from casstore.blobs.groups import group_namespace
from casstore.blobs.learning import Learner, TrainingJob
from casstore.errors import CasStoreError
from casstore.references import content_digest
from casstore.repository.core import RepositoryCore

_logger = logging.getLogger(__name__)


class Learning:
    """Dictionaries trained from the store's own writes."""

    def __init__(self, core: RepositoryCore) -> None:
        self._core = core
        self._database = core.database
        self._blobs = core.blobs

    def train_if_due(self, namespace: str) -> None:
        """
        Train and store the dictionary due for a tool, if one is; a failure is logged and fails nothing.

        :param namespace: The namespace that just wrote: under `namespace` dedup scope only its own groups are trained.
        """
        # After a write has committed, in the writer, outside any transaction: a dictionary due for a tool is trained
        # on the samples the learner kept (bounded, tens of milliseconds) and stored. Nothing is re-encoded: writes
        # after it use it. A failure here loses nothing and fails no write; it is logged, and plain frames go on.
        learner = self._blobs.learner
        assert learner is not None
        job = learner.due(None if self._core.scope.secret is None else namespace)  # a namespace's own, if scoped
        if job is None:
            return
        failures: tuple[type[Exception], ...] = (CasStoreError, *self._core.failures)
        try:
            self._train(learner, job)
        except failures as error:
            _logger.warning(
                "casstore could not store a dictionary for %r (%s); writes go on without it", job.tool, error
            )

    def _train(self, learner: Learner, job: TrainingJob) -> None:
        with self._core.index() as connection:
            active = self._blobs.active_dictionary(connection, job.tool)
        if active is not None and active[0] != job.current and active[1] >= job.samples:
            learner.adopt(job.tool, active[0], samples=active[1])  # another process trained one meanwhile
            return
        current = self._blobs.dictionary(active[0]) if active is not None else None
        content = learner.train(job, None if current is None else current.zstd)
        if content is None:
            return
        # A namespace's own group (`namespace` dedup scope) was trained on its writes, whose digests are keyed.
        key = self._core.scope.key_for(group_namespace(job.tool))
        trained_on = [content_digest(sample, key) for sample in job.training]
        with self._database.transaction() as work:
            digest = self._blobs.record_dictionary(
                work,
                content,
                tool=job.tool,
                samples=job.samples,
                sample_bytes=job.sample_bytes,
                trained_on=trained_on,
            )
        learner.adopt(job.tool, digest, samples=job.samples)
