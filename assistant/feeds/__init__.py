"""Saved feeds, fetching what is new from them, enrichment and the daily run.

`http` is the polite HTTP client every source uses; `model` the feed records kept in the store;
`sources` (arXiv, Hugging Face, RSS) and `s2` (Semantic Scholar) turn answers into papers;
`runner` fetches feeds and moves their watermarks; `enrich` fills missing fields; `daily` holds
the lock, the run record and the digest's delivery.
"""
