"""The API's endpoints, one router per group of the document's tags."""
