"""The floor between the plug-ins and measuring: what the model cannot know alone.

The model (``servelab.config``) checks its own shapes and names no plug-in; the plug-ins
(servers, fronts, load drivers) import the model. Here, above both, an experiment built
from user input is checked once against the plug-ins it names (``checks.checked``, as
uvicorn's ``Config.load`` resolves its protocol classes after the settings are parsed),
and the builders that take user input (``building``, ``run``) call it."""
