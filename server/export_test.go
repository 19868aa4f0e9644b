package server

// CallResultText is callResultText for the external tests: the text of an
// MCP result as the server reads it.
var CallResultText = callResultText
