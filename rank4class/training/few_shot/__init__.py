"""Few labelled rows per class: the rule that recognises such a run, the regression centred at the classes'
texts chosen by cross-validation, and the run that trains, exports and tests it."""
