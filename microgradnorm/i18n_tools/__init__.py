"""The translators' and developers' tools: the gettext catalogs (extract, update, compile, check), the
glossary of terms and its checks, and ``python -m microgradnorm.i18n_tools`` (docs/translating.md).

They stand apart from :mod:`microgradnorm.i18n`, the runtime translation every command uses: these read
the lessons and the exercises to check their translations, and need Babel; nothing in the package
imports them at run time.
"""
