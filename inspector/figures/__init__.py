"""Figure builders: each draws one figure's data (from `inspector.figure_data`) into a pyqtgraph
`GraphicsLayout`, so the interactive views and the headless export draw the same pictures.

Every builder is a class taking `(layout, style)`; `set_data(data)` draws or redraws, and
`hover_text(x, y)` says what is under a point in data coordinates.
"""
