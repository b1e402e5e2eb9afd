"""
The Haystack `ToolResultStore`s: `ContentAddressedToolResultStore` (`local`) and `SharedToolResultStore`
(`shared`), thin over the repository.
"""
