"""
`casstore demo`: a scripted Haystack `Agent` run over a real folder (`session`), its model (`agent`) and its file
tools (`tools`).
"""
