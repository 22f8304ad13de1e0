// Stands in for a layer with no sources yet.
