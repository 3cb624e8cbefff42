"""What the server tests share: the OpenAI routes and the shape every error body must have."""

COMPLETIONS = "/v1/completions"
CHAT = "/v1/chat/completions"


def error_of(response, status):
    """The OpenAI-style error of ``response``, checked: ``status``, the four keys, no traceback."""
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert "Traceback" not in error["message"]
    return error
