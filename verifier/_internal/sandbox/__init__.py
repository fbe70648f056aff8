"""The sandbox: how the verifier runs anything it does not trust (`runner`), the
allow-list and limits (`jail`), and the first process inside it (`child`, a script
run by path, never imported).
"""
