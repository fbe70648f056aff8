"""The reference agent: a manual google-genai loop on the recorder (`audit.recorder`).

`model` holds the model interface (the Gemini API, or a scripted replay),
`tools` the `default` profile's tools with the permission policy, truncation
and checkpoints, `loop` the loop and its stop conditions. `verifier.agent.harness`
runs a whole session with them (recorder opened, loop run, report finished).
"""
