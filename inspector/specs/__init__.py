"""The views, declared once and with no widget or file output in them: each view's declaration
(`registry.SPECS`: name, title, key, reader, figure builder, table, file stem, options, page), what
it shows (`selection.Selection`), its readers of a trace (`figures` for one run, `divergence` for the
views comparing runs), what a bare export shows (`defaults`) and its figure builders (`draw`, the
only module here that loads Qt, imported when a figure is drawn).

The app, its views, the export dialog and `moe-inspector export` all read it; the file output
(PNG, SVG, PDF, CSV) is `inspector.export`.
"""
