"""Memory behind LangGraph's ``BaseStore``: the architectures' one road to memory, any backend.

Why a package: graphs reach long-term memory through ``runtime.store``, so
a ``PostgresStore`` shared by many workers can replace the local default
with no other change. :mod:`.archive_store` is that local default (a
``BaseStore`` whose namespaces are collection folders); :mod:`.policy`
gives the architectures one memory object over any store, the store's
search, get and put under the one memory policy
(:mod:`agentic_loop.memory.policy`: similarity search with MMR, the
near-duplicate gate, the embedder guard); :mod:`.values` maps records to store values and back;
:mod:`.index` builds a store's vector index from our embedder.

Example:
    >>> from langgraph.store.memory import InMemoryStore
    >>> from agentic_loop.memory import HashingEmbedder
    >>> from agentic_loop.memory.store.index import store_index
    >>> from agentic_loop.memory.store.policy import open_memory
    >>> archive = open_memory(InMemoryStore(index=store_index(HashingEmbedder())),
    ...                       ("archive", "taglines"), "archive")
    >>> archive.add_many([{"task": "Tagline for a bakery", "output": "Warm bread."}])[0].status
    'added'
"""
