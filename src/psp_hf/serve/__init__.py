"""`psp serve`: an embedding server for psp models (OpenAI's and text-embeddings-inference's routes) and a search page.

    psp serve MODEL                                   # http://127.0.0.1:8080/v1/embeddings, /embed, /metrics ...
    psp serve en=MODEL_A -m de=MODEL_B --port 9000    # several models, chosen by the request's "model"
    psp serve MODEL --index sentences.txt             # GET / is a search page over the file's lines

Needs the `serve` extra: pip install 'psp-hf[serve]'. The modules: `app` (assembles the app), `openai_api`,
`tei_api` and `search` (the routes, one handler each), `middleware` (key, limits, timeout, metrics around every
route), `state` (what the handlers read), `requests` (reading and checking request bodies), `responses` (JSON
answers and errors), `schemas` (the OpenAPI document), `batching` (requests merged into one encode), `metrics`
(Prometheus counters), `index` (the search index); the options and start-up are `psp_hf.cli.serve`.
"""
