"""The Hydra configs of ``drest train`` (``train.yaml``, the ``agent`` group), shipped in the
package; the app finds them as ``pkg://drest.conf``."""
