"""The review UI (Textual): a shell over the core, which never imports it."""
