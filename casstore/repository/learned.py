"""The learned encodings' part of the `Repository`: training dictionaries after a write, and what blobs need."""

import logging
from collections.abc import Iterable

from casstore.blobs.learning import Learner, TrainingJob, group_namespace
from casstore.errors import CasStoreError
from casstore.references import content_digest
from casstore.repository.core import RepositoryCore

_logger = logging.getLogger(__name__)


class LearnedEncodings(RepositoryCore):
    """Dictionaries trained from the store's own writes, and the blobs a learned frame needs."""

    def _train_if_due(self, namespace: str) -> None:
        # After a write has committed, in the writer, outside any transaction: a dictionary due for a tool is trained
        # on the samples the learner kept (bounded, tens of milliseconds) and stored. Nothing is re-encoded: writes
        # after it use it. A failure here loses nothing and fails no write; it is logged, and plain frames go on.
        learner = self._blobs.learner
        assert learner is not None
        job = learner.due(self._scope.blob_namespace(namespace))
        if job is None:
            return
        failures: tuple[type[Exception], ...] = (CasStoreError, *self._failures)
        try:
            self._train(learner, job)
        except failures as error:
            _logger.warning(
                "casstore could not store a dictionary for %r (%s); writes go on without it", job.tool, error
            )

    def _train(self, learner: Learner, job: TrainingJob) -> None:
        with self._index() as connection:
            active = self._blobs.active_dictionary(connection, job.tool)
        if active is not None and active[0] != job.current and active[1] >= job.samples:
            learner.adopt(job.tool, active[0], samples=active[1])  # another process trained one meanwhile
            return
        current = self._blobs.dictionary(active[0]) if active is not None else None
        content = learner.train(job, None if current is None else current.zstd)
        if content is None:
            return
        # A namespace's own group (`namespace` dedup scope) was trained on its writes, whose digests are keyed.
        key = self._scope.key_for(group_namespace(job.tool))
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

    def blob_dependencies(self, digests: Iterable[str]) -> set[str]:
        """
        :param digests: Blobs by digest.
        :returns: Every blob those need to be read (a delta's base, and what that needs in turn),
            which gc must keep while any of `digests` is kept; `digests` themselves only where one needs another.
        """
        with self._index() as connection:
            return self._blobs.dependencies(connection, digests)

    def encoding_counts(self) -> dict[str, int]:
        """:returns: How many blobs are stored `plain`, with a `dictionary`, as a `delta`; and how many dictionaries."""
        with self._index() as connection:
            return self._blobs.encodings(connection)

    def learning_figures(self) -> dict[str, float]:
        """:returns: How often this repository object trained a dictionary, and the seconds it took in all."""
        learner = self._blobs.learner
        if learner is None:
            return {"trainings": 0.0, "training_seconds": 0.0}
        return {"trainings": float(learner.trainings), "training_seconds": learner.training_seconds}
