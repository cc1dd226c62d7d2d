"""A small cross-language glossary: the words people use for tool tasks in Spanish, French,
German, Portuguese and Italian, mapped to the English words tool descriptions use.

Tool catalogs are written in English and the default embedder (all-MiniLM-L6-v2) is English-only,
so "crea una rama" has no word in common with `create_branch`, neither for BM25 nor for the
embedder. Each known word adds its English reading to the query and is kept itself: many are
English words too ("base", "canal", "pasta", "dossier"), and "query the knowledge base" must still
be searched with "base". Unknown words pass unchanged.
Keys are lower-case and without accents.

The same goes for the shorthand people type for products and things, in any language: "k8s" is
Kubernetes and "gh" GitHub in every catalog, and neither BM25 nor the embedder can tell.
"""

from __future__ import annotations

import unicodedata

_ENTRIES = {
    "create": "crear crea crees creer cree creez erstellen erstelle erstellt anlegen lege criar "
              "crie creare nuova nuevo nueva nouveau nouvelle neu neue neuen novo",
    "delete": "borrar borra elimina eliminar supprimer supprime efface effacer loschen losche "
              "entfernen entferne apagar apaga excluir cancella eliminare",
    "list": "listar lista liste lister listez auflisten zeige zeig mostrar muestra affiche "
            "afficher anzeigen elenca",
    "search": "buscar busca busque chercher cherche recherche rechercher suchen suche finden "
              "finde encontrar encuentra trouver trouve procurar procura cerca cercare",
    "send": "enviar envia envie envoyer envoie envoyez senden sende schicken schicke schick inviare "
            "invia mandar manda",
    "update": "actualizar actualiza modificar modifica modifier mettre aktualisieren aktualisiere "
              "andern atualizar atualiza aggiornare aggiorna cambiar cambia changer",
    "add": "anadir anade agregar agrega ajouter ajoute ajoutez hinzufugen fuge adicionar "
           "adiciona aggiungere aggiungi",
    "get": "obtener obtiene obten obtenir recuperer holen abrufen obter ottenere",
    "read": "leer lee lire lis lesen lese ler leggere leggi",
    "move": "mover mueve deplacer deplace verschieben verschiebe spostare sposta",
    "close": "cerrar cierra fermer ferme schliessen schliesse fechar chiudere chiudi",
    "merge": "fusionar fusiona fusionner fusionne zusammenfuhren",
    "refund": "reembolsar reembolsa reembolso rembourser rembourse remboursement erstatten "
              "erstatte ruckerstattung rimborsare rimborsa",
    "payment": "pago pagos paiement paiements zahlung zahlungen pagamento",
    "invoice": "factura facture rechnung fattura fatura",
    "customer": "cliente clientes kunde kunden",
    "email": "correo correos courriel courriels correio",
    "message": "mensaje mensajes nachricht nachrichten mensagem messaggio",
    "channel": "canal canales kanal kanale canale",
    "calendar": "calendario calendrier kalender",
    "meeting event": "reunion reuniones besprechung termin teammeeting rendezvous evento "
                     "evenement riunione cita",
    "time": "hora heure heures uhrzeit uhr zeit spat ora",
    "today": "hoy aujourd heute hoje oggi",
    "tomorrow": "manana demain morgen amanha domani",
    "branch": "rama ramas branche zweig ramo",
    "repository": "repositorio repositorios",
    "comment": "comentario comentarios commentaire commentaires kommentar kommentare "
               "commento comentar commenter kommentieren",
    "card": "tarjeta tarjetas carte cartes karte karten cartao carta",
    "task": "tarea tareas tache taches aufgabe aufgaben tarefa compito",
    "ticket issue": "incidencia incidencias probleme fehler chamado",
    "pending": "pendiente pendientes attente offen offene pendente",
    "on-call oncall": "guardia astreinte bereitschaft bereitschaftsdienst rufbereitschaft plantao",
    "who": "quien qui wer quem chi",
    "file": "archivo archivos fichier fichiers datei dateien arquivo",
    "folder directory": "carpeta dossier ordner verzeichnis pasta cartella",
    "page": "pagina seite",
    "user": "usuario usuarios utilisateur utilisateurs benutzer nutzer utente",
    "project": "proyecto proyectos projet projets projekt projekte progetto projeto",
    "table": "tabla tableau tabelle tabella",
    "database": "base datos donnees datenbank dados",
    "screenshot": "captura bildschirmfoto",
    "report": "informe bericht relatorio",
    "weather": "tiempo clima meteo wetter",
    "deploy": "desplegar despliega deployer deploie bereitstellen",
    "document": "documento documentos dokument dokumente",
    "status": "estado etat statut zustand",
    "price": "precio prix preis preco prezzo",
    "subscription": "suscripcion abonnement assinatura abbonamento",
}

_SHORTHAND = {
    "github": "gh",
    "kubernetes": "k8s kube kubectl",
    "postgres postgresql": "pg psql",
    "cloudflare": "cf",
    "terraform": "tf",
    "google calendar": "gcal",
    "google maps": "gmaps",
    "knowledge base": "kb",
    "production": "prod",
    "message": "msg msgs",
}


def _fold(word: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", word.lower())
                   if unicodedata.category(c) != "Mn")


GLOSSARY: dict[str, tuple[str, ...]] = {}
for _english, _words in [*_ENTRIES.items(), *_SHORTHAND.items()]:
    for _word in _words.split():
        GLOSSARY[_fold(_word)] = GLOSSARY.get(_fold(_word), ()) + tuple(_english.split())


def english(word: str) -> tuple[str, ...]:
    """The English words a foreign task word stands for, or () when it is not in the glossary."""
    return GLOSSARY.get(_fold(word), ())


def english_gloss(words: list[str]) -> list[str]:
    """English readings of the glossary words among `words`, in order, without repeats."""
    seen: dict[str, None] = {}
    for word in words:
        for meaning in english(word):
            seen.setdefault(meaning, None)
    return list(seen)
