"""The command layer: one plain function per thing a face asks for (submit, verify,
show a session, gate, export, evidence), taking the `Config` explicitly. The CLI,
the API, the worker and the demo call these; none of them opens the store or
sequences the steps itself.
"""
