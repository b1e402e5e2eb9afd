"""`casstore demo`: a scripted Haystack `Agent` run over a real folder (`session`), with its tools (`tools`)."""
