"""The review UI (Textual): a shell over the core, which never imports it.

The app wires; widgets render; actions decide. Lower modules never import higher ones:

- `app`: `ReviewApp`, the App: key bindings (footer, help), layout, lifecycle, events.
- `actions`: the keys that change papers (decide, star, undo, delete, tags, note, lists, open).
- `navigation`: the keys that change what the queue shows (views, sorts, filter, search).
- `workers`: background work (the queue's index, refreshing, the personal model, assessing).
- `saving`: writing changes; what the store refuses or a server down cannot take is kept,
  retried (a server's by the refresh once it answers), written to a recovery file.
- `recovery`: the kept changes on disk, and writing them when the next session opens the store.
- `view`: the session's state and the queue on screen (rows, summary, detail pane, counts).
- `state`: the views, the undo stack's entries, the changes kept unsaved.
- `widgets`: the queue table, the summary bar, the detail pane, the footer of keys; how they render a paper.
- `screens`: the dialogs (error, confirm, help, filter, tags, note, lists) and the search line.
- `dialogs`: what dialogs need that is not a screen (the error guard, questions, help rows).
- `app.tcss`: the styles.

`ReviewApp` is composed of the parts' classes: `Decisions` (actions, over `Saving` and
`Workers`) and `Navigation` (over `Workers`), all over `QueueView`.
"""
